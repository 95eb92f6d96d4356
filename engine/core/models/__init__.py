"""Local models as inputs: a Hugging Face model folder identified by a manifest of its files' SHA-256
(``manifest``), its OpenSSF model-signing signature checked (``signature``), loaded from safetensors only
(``runtime``, which imports torch and transformers on first use), scored on text windows (``windows``), and
tiny GPT-2 models built locally for the tests and examples (``tiny``)."""
