"""What a packed sample is (docs/architecture.md §13): training documents as spans (`documents`), Go examples and
Go trajectory documents as text (`go_examples`, `go_trajectories`, their tokens `go_tokens`), the tokenizer
(`tokenizer`) and the train / held-out split by source (`split`). The packing stage writes this format and the
loader and evaluation read it; it imports neither."""
