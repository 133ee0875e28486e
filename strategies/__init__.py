"""Training speed-up techniques as composable objects that work in any PyTorch loop.

    from strategies import AMP, Compile, compose
    stack = compose(AMP("bf16"), Compile())

Each technique is one `Strategy` in its own module; `compose` stacks them and
the stack's hooks drive the loop (docs/strategies.md, "The hooks"). Depends on torch only.
"""
from strategies.activation_checkpointing import ActivationCheckpointing
from strategies.amp import AMP
from strategies.attention_backend import AttentionBackend
from strategies.base import Strategy
from strategies.batch_size import BatchSize
from strategies.channels_last import ChannelsLast
from strategies.compile import Compile
from strategies.compiled_optimizer import CompiledOptimizer
from strategies.cuda_graphs import CUDAGraphs
from strategies.cudnn_benchmark import CudnnBenchmark
from strategies.device_resident_data import DeviceResidentData
from strategies.float8 import Float8
from strategies.fused_optimizer import FusedOptimizer
from strategies.half_precision import HalfPrecision
from strategies.num_workers import NumWorkers
from strategies.pin_memory import PinMemory
from strategies.presets import PRESETS, preset
from strategies.set_to_none import SetToNone
from strategies.stack import ConflictError, Stack, compose
from strategies.tf32 import TF32, fp32_precision, set_fp32_precision
from strategies.torchscript import TorchScript

REGISTRY: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (
        NumWorkers, PinMemory, DeviceResidentData, BatchSize, SetToNone, FusedOptimizer, CompiledOptimizer, AMP,
        HalfPrecision, Float8, TF32, ChannelsLast, CudnnBenchmark, AttentionBackend, ActivationCheckpointing,
        TorchScript, Compile, CUDAGraphs,
    )
}

__all__ = [
    "AMP", "ActivationCheckpointing", "AttentionBackend", "BatchSize", "CUDAGraphs", "ChannelsLast", "Compile",
    "CompiledOptimizer", "ConflictError", "CudnnBenchmark", "DeviceResidentData", "Float8", "FusedOptimizer",
    "HalfPrecision", "NumWorkers", "PRESETS", "PinMemory", "REGISTRY",
    "SetToNone", "Stack", "Strategy", "TF32", "TorchScript", "compose", "fp32_precision", "preset",
    "set_fp32_precision",
]
