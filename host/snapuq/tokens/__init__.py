"""Uncert: uncertainty-guided token reduction in a tiny spiking transformer.

- `model`: the spiking transformer (patch tokens, LIF neurons with a surrogate gradient, spiking
  self-attention, T time steps) with a forward pass that accepts a token reduction at one block.
- `uncertainty`: per-token, per-step Dirichlet uncertainty and the importance S_i = mean_t U + λ·std_t U.
- `reduce`: top-K pruning and merging, and the baseline criteria (random, magnitude, spikes, similarity).
- `sops`: synaptic operations counted from the spikes of a forward pass.
- `fixed`: the integer importance + top-K that `firmware/core/snapuq_tokens.c` implements bit-exactly.
- `snaptok`: SNAP surprisal heads on the transformer's token stream.
- `cli`: `snapuq tokens eval`.
"""
