"""The packing stage: trajectories and Go examples as documents of token spans, packed into fixed-length samples."""
