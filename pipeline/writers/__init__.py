"""Writers: the one path by which rows become files of a dataset."""
