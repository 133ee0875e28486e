"""ablate: measure which PyTorch training speed-ups are worth it, on your model and hardware."""
__version__ = "0.1.0"
