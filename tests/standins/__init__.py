"""Stand-ins for the dress rehearsal (`tests/rehearse.py`): everything the paper profile reaches for at
home, served from 127.0.0.1 or built on disk, deterministically.

- `card_benchmark`: a benchmark shaped like the official IndicIPR-QA files (the card's counts and means),
  built from the statute sections in `data/sample/statutes/`;
- `checkpoints`: small random-init BERT checkpoints with the bert-base-uncased vocabulary, one per hub id;
- `hub`: a Hugging Face hub stand-in (selected with `HF_ENDPOINT`) serving the dataset repo and the checkpoints;
- `openai_server`: an OpenAI-compatible chat server answering under every paper model name, with faults (also the
  fake LLM server of the tests: scripted answers, reply functions, Ollama's native API).

None of it is part of the `indicipr` library; it exists to run the paper path offline.
"""
