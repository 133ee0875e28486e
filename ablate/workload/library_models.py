"""Models from the libraries practitioners train, by name: `hf:`, `timm:` and `torchvision:`.

- ``hf:ARCH`` (``hf:llama``, ``hf:gpt2``, ``hf:qwen2``, ``hf:bert``...): a Hugging Face ``transformers``
  causal language model built from its configuration alone, ``AutoConfig.for_model(ARCH, **model_options)``
  then ``AutoModelForCausalLM.from_config``: random weights, nothing downloaded. ``hf:PATH`` takes the
  configuration (and the weights and tokenizer, where the folder has them) from a local folder;
  ``hf:ORG/NAME`` is a hub id, fetched (configuration and tokenizer, never the weights) only on a
  connected machine - offline (``HF_HUB_OFFLINE=1``, or no network) and not in the local cache, it is
  refused with one line.
- ``timm:NAME``: ``timm.create_model(NAME, pretrained=False, **model_options)``.
- ``torchvision:NAME``: ``torchvision.models.get_model(NAME, weights=None, **model_options)``.

Speed is measured from random initialisation, so pretrained weights (a download) are refused.
``transformers`` and ``timm`` are optional extras (``pip install 'ablate[hf]'``, ``'ablate[timm]'``); a
missing one is one line naming that command. An unknown architecture lists the nearest names.
Every problem here is a `ModelUnavailable` (a LookupError): the study loader turns it into one line.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import os
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from torch import nn

from ablate.workload.registry import unknown

__all__ = ["PREFIXES", "ModelUnavailable", "is_library", "factory", "check_options", "text_encoding",
           "decoder_flops_per_token", "preloads"]

PREFIXES = ("hf", "timm", "torchvision")
LISTED = 10  # names an unknown architecture's error lists: the nearest, not the thousand timm has
_EXTRA = {"hf": ("transformers", "hf"), "timm": ("timm", "timm"), "torchvision": ("torchvision", None)}
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


class ModelUnavailable(LookupError):
    """A library model cannot be built here (extra missing, unknown name, hub offline); the message is one line."""


# What building a library's model imports, beyond torch and torchvision: `preloads`. transformers' base, its Auto
# classes and modeling_utils take seconds of a trial's start-up, timm about one (docs/evidence.md, "Evidence: trial
# processes"), so trial interpreters started ahead import them.
_PRELOADS = {"hf": ("transformers", "transformers.modeling_utils", "transformers.models.auto.modeling_auto"),
             "timm": ("timm",)}


def preloads(name: Any) -> tuple[str, ...]:
    """The modules a trial of model `name` imports that trial interpreters started ahead can import for it
    (`ablate.trial.interpreters`): its library's, for a library model; none for the project's own models."""
    return _PRELOADS.get(str(name).partition(":")[0], ()) if is_library(name) else ()


def is_library(name: Any) -> bool:
    """Whether `name` names a library model (``hf:...``, ``timm:...``, ``torchvision:...``)."""
    return isinstance(name, str) and ":" in name and name.partition(":")[0] in PREFIXES


def _split(name: str) -> tuple[str, str]:
    prefix, _, ref = name.partition(":")
    if not ref:
        raise ModelUnavailable(f"model {name!r} names no architecture: give {prefix}:NAME")
    return prefix, ref


def _library(name: str) -> ModuleType:
    """The library a prefix needs, or one line naming the pip install that provides it."""
    module, extra = _EXTRA[_split(name)[0]]
    try:
        return importlib.import_module(module)
    except ImportError as error:
        fix = (f"pip install 'ablate[{extra}]' (pip install -e '.[{extra}]' in a clone)" if extra
               else f"pip install {module}")
        raise ModelUnavailable(f"model {name!r} needs {module}, which cannot be imported ({error}): {fix}") from None


def _why(error: Exception) -> str:
    return " ".join(str(error).split())[:200]  # library messages span lines


def _refuse_weights(name: str, options: dict[str, Any], key: str) -> None:
    if options.get(key):
        raise ValueError(f"model {name!r}: {key} would download pretrained weights; ablate measures speed from "
                         f"random initialisation, so leave {key} out")


# Hugging Face transformers ------------------------------------------------------------------------------------

def _hf_where(ref: str) -> str:
    """"folder" (a local folder), "hub" (ORG/NAME) or "architecture" (a model type such as llama)."""
    if Path(ref).expanduser().is_dir():
        return "folder"
    if ref.startswith((".", "/", "~")):
        raise ModelUnavailable(f"model 'hf:{ref}': folder {Path(ref).expanduser()} does not exist")
    return "hub" if "/" in ref else "architecture"


def _hf_architecture(transformers: ModuleType, ref: str) -> None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    causal = sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    if ref in causal:
        return
    if ref in CONFIG_MAPPING_NAMES:  # a real architecture, without the head the causal_lm task trains
        raise ModelUnavailable(f"model 'hf:{ref}': transformers {transformers.__version__} has no causal-LM head "
                               f"for {ref!r}, and causal_lm is the task hf: models train; "
                               + unknown("causal-LM architecture", [ref], causal, lead="nearest", most=LISTED))
    raise ModelUnavailable(unknown("hf architecture", [ref], causal, most=LISTED,
                                   tail=" (causal LMs of transformers), hf:PATH (a local config folder) or "
                                        "hf:ORG/NAME (a hub id)"))


def _hf_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


@functools.cache
def _hf_base(ref: str) -> Any:
    """The configuration `ref` names, before the study's options: built, read from a folder, or fetched."""
    transformers = _library(f"hf:{ref}")
    where = _hf_where(ref)
    if where == "architecture":
        _hf_architecture(transformers, ref)
        return transformers.AutoConfig.for_model(ref)
    try:
        return transformers.AutoConfig.from_pretrained(ref, local_files_only=where == "folder" or _hf_offline())
    except (OSError, ValueError) as error:  # not cached and offline, no network, no such repository
        if where == "folder":
            raise ModelUnavailable(f"model 'hf:{ref}': no readable config.json there ({_why(error)})") from None
        raise ModelUnavailable(
            f"model 'hf:{ref}': hub id {ref!r} is not in the local Hugging Face cache and the hub cannot be reached "
            f"(HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '')!s}; {_why(error)[:120]}); fetch it once on a "
            "connected machine, or use hf:PATH (a local config folder) or hf:ARCH (e.g. hf:llama)") from None


def _hf_config(ref: str, options: dict[str, Any]) -> Any:
    """The configuration with the study's options; a decoder flag set where the architecture has one."""
    base = _hf_base(ref)
    if "is_decoder" in base.to_dict() and "is_decoder" not in options:
        # BERT-like models are bidirectional unless told otherwise, and would read the labels they predict.
        options = {**options, "is_decoder": True}
    if _hf_where(ref) == "architecture":  # through __init__, so derived sizes (head_dim) follow the options
        return _library(f"hf:{ref}").AutoConfig.for_model(ref, **options)
    return type(base).from_dict({**base.to_dict(), **options})


def _hf_model(ref: str, seq_len: int | None = None, **options: Any) -> nn.Module:
    """A causal LM from its configuration; `seq_len` (the task's) is checked and sets FLOPs per token."""
    transformers = _library(f"hf:{ref}")
    config = _hf_config(ref, options)
    positions = getattr(config, "max_position_embeddings", None)
    if seq_len and positions and seq_len > positions:
        raise ValueError(f"model 'hf:{ref}': the task's seq_len {seq_len} is above max_position_embeddings "
                         f"{positions}; raise it in model_options or shorten seq_len")
    folder = _hf_where(ref) == "folder"
    if folder and any((Path(ref).expanduser() / f).is_file() for f in _WEIGHT_FILES):
        model = transformers.AutoModelForCausalLM.from_pretrained(ref, config=config, local_files_only=True)
    else:
        model = transformers.AutoModelForCausalLM.from_config(config)
    if seq_len:
        # What ablate.trial.process reads for MFU; an attribute, so the model stays the library's own class.
        model.flops_per_token = functools.partial(decoder_flops_per_token, model, seq_len)
    return model


def decoder_flops_per_token(model: nn.Module, seq_len: int) -> float:
    """Training FLOPs per token of a decoder: 6 per matmul weight plus attention's 12 * layers * width * seq_len
    (PaLM, Chowdhery et al. 2022, appendix B), as `ByteGPT.flops_per_token`. Embedding tables are lookups and
    left out, except one tied to the output head, which is a matmul there and counts once."""
    output_embeddings = getattr(model, "get_output_embeddings", None)  # a transformers model's, not nn.Module's
    head = output_embeddings() if output_embeddings is not None else None
    head_weight = getattr(head, "weight", None)
    lookups = {id(m.weight): m.weight.numel() for m in model.modules()
               if isinstance(m, nn.Embedding) and m.weight is not head_weight}
    weights = sum(p.numel() for p in model.parameters()) - sum(lookups.values())
    config: Any = model.config  # a transformers model's configuration: its fields depend on the architecture
    return 6.0 * weights + 12.0 * config.num_hidden_layers * config.hidden_size * seq_len


def text_encoding(name: str, options: dict[str, Any]) -> tuple[str | None, str]:
    """How text reaches `hf:` model `name`: (the tokenizer's folder or hub id, or None for bytes; the sentence
    saying which). Bytes are token ids 0-255, so the vocabulary must hold 256 of them."""
    ref = _split(name)[1]
    where = _hf_where(ref)
    local = where == "folder" and any((Path(ref).expanduser() / f).is_file() for f in _TOKENIZER_FILES)
    if local or where == "hub":
        return ref, f"text tokenized by {ref}'s own tokenizer (transformers AutoTokenizer)"
    vocab = _hf_config(ref, options).vocab_size
    if vocab < 256:
        raise ValueError(f"model {name!r}: without a tokenizer, text is bytes (ids 0-255), which need vocab_size "
                         f">= 256, not {vocab}; raise vocab_size in model_options or use hf:PATH with a tokenizer")
    return None, (f"text as bytes: each byte is token id 0-255 of the model's {vocab:,}-token vocabulary (no "
                  f"tokenizer is available locally for {name}; hf:PATH to a folder with one tokenizes)")


# timm and torchvision ----------------------------------------------------------------------------------------

def _timm_model(ref: str, **options: Any) -> nn.Module:
    _refuse_weights(f"timm:{ref}", options, "pretrained")
    return _library(f"timm:{ref}").create_model(ref, **{**options, "pretrained": False})


def _torchvision_model(ref: str, **options: Any) -> nn.Module:
    _refuse_weights(f"torchvision:{ref}", options, "weights")
    _library(f"torchvision:{ref}")
    from torchvision.models import get_model

    return get_model(ref, **{**options, "weights": None})


def _check_vision_name(name: str) -> None:
    prefix, ref = _split(name)
    library = _library(name)
    names = library.list_models() if prefix == "timm" else library.models.list_models()
    if ref not in names:
        raise ModelUnavailable(unknown(f"{prefix} model", [ref], names, most=LISTED))


# Dispatch ----------------------------------------------------------------------------------------------------

def factory(name: str) -> Callable[..., nn.Module]:
    """The constructor of library model `name` (its keyword arguments are the study's model_options); checks
    the name now - extra installed, architecture known, hub id reachable - so a bad one is refused at load."""
    prefix, ref = _split(name)
    if prefix == "hf":
        _hf_base(ref)
        return functools.partial(_hf_model, ref)
    _check_vision_name(name)
    return functools.partial(_timm_model if prefix == "timm" else _torchvision_model, ref)


def check_options(name: str, options: dict[str, Any]) -> None:
    """ValueError naming the nearest valid key for an option `name`'s constructor would not take.

    A transformers configuration accepts any keyword silently (it becomes an attribute nobody reads), so an
    `hf:` option must be one of the configuration's own keys; timm and torchvision constructors raise
    TypeError themselves when the model is built (on the meta device, at load).
    """
    prefix, ref = _split(name)
    if prefix != "hf":
        return
    base = _hf_base(ref)
    known = set(base.to_dict()) | set(getattr(base, "attribute_map", {}))
    known |= set(inspect.signature(type(base).__init__).parameters) - {"self", "kwargs"}
    if strangers := sorted(k for k in options if k not in known):
        raise ValueError(unknown("option", strangers, known, lead=f"{type(base).__name__} keys include", most=LISTED))
