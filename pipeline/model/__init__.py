"""The model that pretraining trains and evaluation scores (docs/architecture.md §13): the network (`network`), a
run directory's files (`checkpoints`) and a trained network with its tokenizer, decoding (`decoding.Model`)."""
