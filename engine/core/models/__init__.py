"""Local models as inputs: a Hugging Face model folder identified by a manifest of its files' SHA-256
(``manifest``), loaded from safetensors only (``runtime``, which imports torch and transformers on first use)."""
