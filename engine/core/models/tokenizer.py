"""A model folder's tokenizer, and the special tokens it adds around a text.

The tokenizer is ``tokenizers.Tokenizer`` built from ``tokenizer.json``'s bytes (the bytes the manifest hashed).
Encoding a text with ``add_special_tokens=True`` applies its post-processor: the tokens a model family puts around
a text, such as Llama's and Gemma's beginning-of-sequence token (a ``TemplateProcessing`` of ``<s> $A``) or OPT's
``</s>``, and nothing for GPT-2, Qwen2 or GPT-NeoX. This is what transformers applies (``AutoTokenizer``, which
Hugging Face's perplexity recipe uses) for a folder with a ``tokenizer.json``: transformers 5 treats its
post-processor as authoritative and drops ``tokenizer_config.json``'s ``add_bos_token``/``add_eos_token``
(``PreTrainedTokenizerBase._from_pretrained``); transformers 4 did the same for its generic
``PreTrainedTokenizerFast``, while its Llama-family classes rebuilt the post-processor from those two settings.
certa follows ``tokenizer.json`` whatever transformers is installed, so the tokens scored do not depend on it, and
``SpecialTokens`` states what it adds (a stage records it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from certa.engine.foundation.errors import InputError

__all__ = ["SpecialTokens", "read_tokenizer"]

_PROBE = "certa"


@dataclass(frozen=True)
class SpecialTokens:
    """The token ids a tokenizer's post-processor adds ``before`` and ``after`` a text."""

    before: tuple[int, ...]
    after: tuple[int, ...]

    def record(self, tokenizer: Any) -> dict[str, list[str]]:
        """JSON-able: the tokens (as strings) added before and after a text."""
        return {"before": [str(tokenizer.id_to_token(i)) for i in self.before],
                "after": [str(tokenizer.id_to_token(i)) for i in self.after]}


def _added(tokenizer: Any) -> SpecialTokens:
    """The ids the post-processor adds before and after a text, found around a probe's own tokens (all before when
    the probe has no token of its own)."""
    plain = tokenizer.encode(_PROBE, add_special_tokens=False).ids
    full = tokenizer.encode(_PROBE, add_special_tokens=True).ids
    for at in range(len(full) - len(plain) + 1):
        if plain and full[at: at + len(plain)] == plain:
            return SpecialTokens(before=tuple(full[:at]), after=tuple(full[at + len(plain):]))
    return SpecialTokens(before=tuple(full), after=())


def read_tokenizer(name: str, raw: bytes, tokenizers: Any) -> tuple[Any, SpecialTokens]:
    """``(tokenizers.Tokenizer, SpecialTokens)`` from ``tokenizer.json``'s bytes ``raw``, or an ``InputError``
    naming the file."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"input '{name}': tokenizer.json is not UTF-8 text (byte {raw[exc.start]:#04x} at "
                         f"position {exc.start})") from None
    try:
        tokenizer = tokenizers.Tokenizer.from_str(text)
    except Exception as exc:  # noqa: BLE001 - tokenizers raises a bare Exception for any malformed file
        detail = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise InputError(f"input '{name}': tokenizer.json cannot be read by tokenizers {tokenizers.__version__} "
                         f"({detail})") from None
    return tokenizer, _added(tokenizer)
