"""The packing stage: documents of the packed format (pipeline/format/) packed into fixed-length samples."""
