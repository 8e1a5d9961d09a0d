"""A trained network as evaluation and learning curves use it: the network, the tokenizer of the packed data it
trains on, and decoding (greedy or sampled) from a prompt, with the model's distribution over the Go outcome
tokens."""

import numpy as np
import torch

from pipeline.debugger.language import ENDS, FRAME_SEP
from pipeline.engine.reader import open_dataset
from pipeline.format.go_tokens import OUTCOME_TOKENS
from pipeline.loader import load_tokenizer
from pipeline.model.checkpoints import latest_checkpoint
from pipeline.model.network import DecodeCache, DecoderLM, ModelConfig
from schemas.go_next_event import OUTCOMES


class Model:
    """A network, the tokenizer of the packed data it trains on, and greedy decoding: a run's newest checkpoint
    (`Model.load`), or the network of a run in training (its learning curve, pipeline/pretrain/curve.py)."""

    def __init__(self, network: DecoderLM, data: str, step: int, device: str):
        self.network, self.config, self.data, self.step, self.device = network, network.config, data, step, device
        self.tokenizer = load_tokenizer(data)
        packed = open_dataset(data, "run tracegen pack")
        self.holdout = float(packed.manifest["config"].get("holdout", 0.0))
        specials = self.tokenizer.special_ids
        self.stops = {specials[FRAME_SEP], *(specials[token] for token in ENDS.values())}
        self.outcome_ids = torch.tensor([specials[OUTCOME_TOKENS[name]] for name in OUTCOMES], device=device)

    @classmethod
    def load(cls, run: str, device: str = "cpu") -> "Model":
        """The run's newest checkpoint; ValueError when it has none."""
        checkpoint = latest_checkpoint(run)
        if checkpoint is None:
            raise ValueError(f"{run!r} has no checkpoint (checkpoints/step_*/): train it with tracegen pretrain")
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        network = DecoderLM(ModelConfig(**state["model_config"])).to(device).eval()
        network.load_state_dict(state["model"])
        return cls(network, state["config"]["data"], state["step"], device)

    def prefill(self, text: str, cache: DecodeCache) -> torch.Tensor | None:
        """Append `text`'s tokens to the document in `cache`; the logits of its last token (None: empty)."""
        ids = self.tokenizer.encode(text)
        if not ids:
            return None
        with torch.no_grad():
            return self.network.extend(torch.tensor([ids], device=self.device), cache)[0, -1]

    def fits(self, cache: DecodeCache, text: str) -> bool:
        """Whether `text` appended to the document in `cache` leaves room for at least one predicted token."""
        return cache.length + len(self.tokenizer.encode(text)) < self.config.seq_len

    def next_state_text(
        self,
        last_logits: torch.Tensor,
        cache: DecodeCache,
        max_new_tokens: int,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> str:
        """The continuation (from the logits of the prompt's last token) through one state's closing token:
        greedy, or sampled at `temperature` > 0 with `generator`; decodes on a fork of `cache`, which stays
        the true prompt's."""
        draft, new, logits = cache.fork(), [], last_logits
        with torch.no_grad():
            for _ in range(max_new_tokens):
                if temperature > 0:
                    probabilities = torch.softmax(logits.float() / temperature, dim=-1)
                    token = int(torch.multinomial(probabilities, 1, generator=generator))
                else:
                    token = int(logits.argmax())
                new.append(token)
                if token in self.stops or draft.length >= self.config.seq_len:
                    break
                logits = self.network.extend(torch.tensor([[token]], device=self.device), draft)[0, -1]
        return self.tokenizer.decode(new)

    def outcome_distribution(self, prompt: str) -> np.ndarray:
        """The model's distribution over the Go outcome tokens right after `prompt`, OUTCOMES order."""
        logits = self.prefill(prompt, DecodeCache(self.config.layers))
        assert logits is not None
        return torch.softmax(logits[self.outcome_ids].float(), dim=-1).cpu().numpy()
