"""Library models by name (`ablate.workload.library_models`): Hugging Face transformers, timm and torchvision, built
from tiny configurations with nothing downloaded, trained one step under every strategy that applies on a CPU, refused
with a reason where one does not; their repeated blocks found; the causal-LM task and FLOPs per token."""
from __future__ import annotations

import os

import pytest
import torch
from torch.utils.data import TensorDataset

pytest.importorskip("transformers", reason="the hf extra: pip install -e '.[hf]'")
pytest.importorskip("timm", reason="the timm extra: pip install -e '.[timm]'")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach the hub

from ablate.workload.library_models import decoder_flops_per_token, preloads
from ablate.workload.models import MODELS
from ablate.workload.registry import lookup
from ablate.workload.tasks import CausalLM, Classification
from strategies import (
    AMP,
    REGISTRY,
    TF32,
    ActivationCheckpointing,
    AttentionBackend,
    BatchSize,
    ChannelsLast,
    Compile,
    CompiledOptimizer,
    CUDAGraphs,
    CudnnBenchmark,
    DeviceResidentData,
    Float8,
    FusedOptimizer,
    HalfPrecision,
    NumWorkers,
    PinMemory,
    SetToNone,
    TorchScript,
    compose,
)
from strategies.blocks import repeated_blocks

SEQ = 16
TINY = {  # name -> model_options: two blocks, width 32
    "hf:llama": dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                     num_key_value_heads=2, vocab_size=256),
    "hf:gpt2": dict(n_layer=2, n_embd=32, n_head=4, n_positions=64, vocab_size=256, bos_token_id=0, eos_token_id=0),
    "timm:vit_tiny_patch16_224": dict(img_size=16, patch_size=4, embed_dim=32, depth=2, num_heads=2, num_classes=10),
    "torchvision:resnet18": dict(num_classes=10),
}
BLOCKS = {"hf:llama": "LlamaDecoderLayer", "hf:gpt2": "GPT2Block", "timm:vit_tiny_patch16_224": "Block",
          "torchvision:resnet18": "BasicBlock"}

# Every registered strategy, as a CPU can try it. A test below fails when one is added without a row here.
STRATEGIES = {
    "num_workers": NumWorkers(1), "pin_memory": PinMemory(), "device_resident_data": DeviceResidentData(),
    "batch_size": BatchSize(4, lr_scaling="sqrt"), "set_to_none": SetToNone(),
    "fused_optimizer": FusedOptimizer("foreach"), "compiled_optimizer": CompiledOptimizer(),
    "amp": AMP("bf16"), "half_precision": HalfPrecision("bf16"), "float8": Float8(), "tf32": TF32(),
    "channels_last": ChannelsLast(), "cudnn_benchmark": CudnnBenchmark(), "attention_backend": AttentionBackend("math"),
    "activation_checkpointing": ActivationCheckpointing(), "torchscript": TorchScript(),
    "compile": Compile(), "compile_regional": Compile(regional=True), "cuda_graphs": CUDAGraphs(),
}
SLOW = {"compile", "compile_regional", "compiled_optimizer"}  # Inductor's C++ compilation: tens of seconds each
# Refused when the model is prepared, with the library's reason: TorchScript cannot script transformers' Python
# (keyword arguments, dataclass outputs, dynamic control flow); timm's ViT and torchvision's ResNet it can.
REFUSED = {("hf:llama", "torchscript"), ("hf:gpt2", "torchscript")}


def build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    factory = lookup(MODELS, name, "model")
    return factory(seq_len=SEQ, **TINY[name]) if name.startswith("hf:") else factory(**TINY[name])


def dataset(name: str) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    if name.startswith("hf:"):
        tokens = torch.randint(0, 256, (8, SEQ + 1), generator=g)
        return TensorDataset(tokens[:, :-1], tokens[:, 1:])
    side = 16 if name.startswith("timm:") else 32
    return TensorDataset(torch.randn(8, 3, side, side, generator=g), torch.randint(0, 10, (8,), generator=g))


def test_every_registered_strategy_has_a_row():
    assert set(REGISTRY) <= set(STRATEGIES), f"add a row for {set(REGISTRY) - set(STRATEGIES)}"


def _step(name: str, key: str) -> float:
    """One training step of `name` under the stack of strategy `key`, through the Stack hooks only; its loss."""
    torch._dynamo.reset()
    device = torch.device("cpu")
    stack = compose(STRATEGIES[key])
    task = CausalLM(SEQ) if name.startswith("hf:") else Classification()
    loader = stack.make_loader(dataset(name), device, batch_size=2, shuffle=False, drop_last=True)
    model = stack.prepare_model(build(name))
    optimizer = stack.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=1e-3))
    batch = stack.to_device(next(iter(loader)), device)
    with stack.autocast(device):
        loss = task.loss(model, batch)
    stack.backward(loss)
    stack.step(optimizer)
    return loss.item()


CASES = [pytest.param(name, key, marks=[pytest.mark.slow] if key in SLOW else [], id=f"{name}-{key}")
         for name in TINY for key in STRATEGIES]


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning")
@pytest.mark.parametrize("name,key", CASES)
def test_a_library_model_trains_a_step_under_each_strategy_or_is_refused_with_a_reason(name, key):
    reason = compose(STRATEGIES[key]).check(torch.device("cpu"))
    if reason is not None:  # this machine cannot run it (CUDA-only, no torchao...): said, never silently
        assert len(reason) > 20 and "\n" not in reason
        return
    if (name, key) in REFUSED:
        with pytest.raises(Exception) as refused:
            _step(name, key)
        assert str(refused.value).strip()
        return
    assert torch.isfinite(torch.tensor(_step(name, key)))


@pytest.mark.parametrize("name", list(TINY))
def test_regional_compile_and_checkpointing_find_the_blocks(name):
    model = build(name)
    blocks = repeated_blocks(model, "test")
    assert {type(b).__name__ for b in blocks} == {BLOCKS[name]}
    assert len(blocks) == (8 if name == "torchvision:resnet18" else 2)  # resnet18: 4 stages of 2 BasicBlocks
    ActivationCheckpointing().prepare_model(model)
    assert all("forward" in vars(b) for b in blocks)  # each block's forward wrapped in place


def test_a_sequential_of_plain_layers_is_not_blocks():
    from strategies.blocks import NoRepeatedBlocks

    with pytest.raises(NoRepeatedBlocks, match="nn.Sequential of two or more blocks"):
        repeated_blocks(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)), "test")


@pytest.mark.parametrize("name", ["hf:llama", "hf:gpt2"])
def test_causal_lm_trains_on_the_models_own_loss_and_scores_next_tokens(name):
    model, task = build(name).eval(), CausalLM(SEQ)  # eval: GPT-2 has dropout, which would differ per call
    inputs, targets = dataset(name).tensors
    own = model(input_ids=inputs, labels=inputs).loss
    logits = model(input_ids=inputs).logits
    by_hand = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), inputs[:, 1:].flatten())
    assert task.loss(model, (inputs, targets)).item() == pytest.approx(own.item()) == pytest.approx(by_hand.item())
    quality = task.evaluate(model, [(inputs, targets)], torch.device("cpu"))
    assert quality.loss == pytest.approx(by_hand.item(), rel=1e-5) and 0 <= quality.accuracy <= 100
    assert dict(quality.extra)["bits_per_token"] > 0


def test_flops_per_token_counts_matmul_weights_and_attention():
    model = build("hf:gpt2")  # tied head, learned positions: the position table is a lookup, the head a matmul
    positions = model.transformer.wpe.weight.numel()
    weights = sum(p.numel() for p in model.parameters()) - positions
    assert model.flops_per_token() == decoder_flops_per_token(model, SEQ) == 6.0 * weights + 12.0 * 2 * 32 * SEQ
    llama = build("hf:llama")  # untied: the input table is a lookup, the head a matmul of its own
    weights = sum(p.numel() for p in llama.parameters()) - llama.model.embed_tokens.weight.numel()
    assert llama.flops_per_token() == 6.0 * weights + 12.0 * 2 * 32 * SEQ


def test_a_bert_trains_as_a_decoder_so_it_cannot_read_the_labels():
    model = lookup(MODELS, "hf:bert", "model")(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                               num_attention_heads=2)
    assert model.config.is_decoder and type(model).__name__ == "BertLMHeadModel"


def test_a_local_folder_with_a_tokenizer_tokenizes_the_text(tmp_path, monkeypatch):
    """hf:PATH: the configuration and the tokenizer from a folder (built here, offline); text becomes its ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoConfig, PreTrainedTokenizerFast

    from ablate.config import study
    from ablate.workload import data

    words = "in the beginning god created heaven and earth".split()
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    folder = tmp_path / "tiny-llama"
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]").save_pretrained(folder)
    AutoConfig.for_model("llama", **{**TINY["hf:llama"], "vocab_size": 16}).save_pretrained(folder)
    text = tmp_path / "text.txt"
    text.write_text("in the beginning god created the heaven and the earth\n" * 40)
    (tmp_path / "s.yaml").write_text(f"model: hf:{folder}\ndataset: text\ndataset_options: {{path: {text}}}\n"
                                     "task: {causal_lm: {seq_len: 8}}\nspace: {amp: [off]}\n")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded = study.load(str(tmp_path / "s.yaml"), "cpu")
    assert loaded.tokenizer == str(folder) and "tokenized by" in loaded.data_note
    splits = data.load(loaded.dataset, **loaded.dataset_kwargs)
    inputs, targets = splits.train[0]
    assert inputs.tolist() == [1, 2, 3, 4, 5, 2, 6, 7] and "tokenized" in splits.note  # ids, not bytes
    model = lookup(MODELS, loaded.model, "model")(seq_len=8)
    assert model.config.vocab_size == 16 and CausalLM(8).loss(model, (inputs[None], targets[None])).item() > 0


def test_without_a_tokenizer_a_vocabulary_below_256_is_refused(tmp_path, monkeypatch):
    from ablate.config import study

    (tmp_path / "s.yaml").write_text("model: hf:llama\nmodel_options: {vocab_size: 100}\ndataset: kjv\n"
                                     "task: {causal_lm: {seq_len: 8}}\nspace: {amp: [off]}\n")
    with pytest.raises(study.StudyError, match="text is bytes .ids 0-255., which need vocab_size >= 256, not 100"):
        study.load(str(tmp_path / "s.yaml"), "cpu")


def test_what_a_trial_interpreter_imports_ahead_is_the_models_library_and_it_imports():
    import importlib

    assert preloads("mnist_cnn") == () and preloads("torchvision:resnet18") == ()  # torchvision: always imported
    assert preloads("timm:resnet18") == ("timm",)
    for module in preloads("hf:gpt2"):  # the modules named exist in the transformers installed
        importlib.import_module(module)
