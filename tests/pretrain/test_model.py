"""The model's attention stays inside a document, and cached decoding equals a full forward pass."""

import torch

from pipeline.model.network import DecodeCache, DecoderLM, ModelConfig


def model() -> DecoderLM:
    torch.manual_seed(0)
    return DecoderLM(ModelConfig(vocab_size=300, seq_len=64)).eval()


def test_a_document_packed_after_another_sees_nothing_of_it():
    network, ids = model(), torch.randint(0, 300, (2, 64))
    documents = torch.zeros(2, 64, dtype=torch.long)
    documents[:, 40:] = 1
    positions = torch.cat([torch.arange(40), torch.arange(24)]).expand(2, 64)
    with torch.no_grad():
        packed = network(ids, documents, positions)
        alone = network(ids[:, 40:])
    assert torch.allclose(packed[:, 40:], alone, atol=1e-5)
    assert not torch.allclose(network(ids)[:, 40:], alone, atol=1e-3)  # without the mask it would see it


def test_decoding_with_the_cache_gives_the_logits_of_a_full_forward_pass():
    network, ids = model(), torch.randint(0, 300, (1, 50))
    with torch.no_grad():
        full = network(ids)
        cache = DecodeCache(network.config.layers)
        prompt = network.extend(ids[:, :30], cache)
        draft = cache.fork()
        steps = [network.extend(ids[:, i : i + 1], draft) for i in range(30, 50)]
        rest = network.extend(ids[:, 30:], cache)  # the fork left the prompt's cache as it was
    assert torch.allclose(full[:, :30], prompt, atol=1e-5)
    assert torch.allclose(full[:, 30:], torch.cat(steps, dim=1), atol=1e-5)
    assert torch.allclose(full[:, 30:], rest, atol=1e-5) and cache.length == 50 and draft.length == 50
