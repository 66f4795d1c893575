"""`make test-real-model`: the coder agent against a real model server (llama.cpp's llama-server and
SmolLM2-135M-Instruct, both from PyPI), through the real path: a dev server, a worker, the openai client
and the anthropic SDK (llama-server's `/v1/messages`, streaming and not). Run it with `python -m
devtools.real_model`; `llama_server.py` starts the model server, `recorder.py` records what its Anthropic
endpoint sent, to check that every tool call reached the run."""
