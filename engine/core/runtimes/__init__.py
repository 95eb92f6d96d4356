"""Model runtimes: what answers a scorer's questions about a model, whether the model runs in this process (a local
Hugging Face folder) or behind a served endpoint (an OpenAI-compatible server such as vLLM or TGI). Below the runtimes
sit ``http_client`` (the HTTP client that talks to an endpoint, with its retries, budget and transcripts) and
``completions`` (what certa asks an OpenAI-compatible server and how it reads the answers)."""
