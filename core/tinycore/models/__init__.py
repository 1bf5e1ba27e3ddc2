"""Model definitions built from tinycore.nn layers, named so that their state dicts load from the reference checkpoints."""
