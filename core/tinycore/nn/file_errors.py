"""The errors every loader raises for a file it won't load, so a caller catches one type whatever the format."""

class CorruptFileError(ValueError):
  """A checkpoint that can't be what it claims (sizes, offsets, strides, counts or dtypes that don't fit the file): the
  message names the file, the tensor or field, and the byte offset where known."""

class UnsupportedFileError(CorruptFileError, NotImplementedError):
  """A well-formed file using something tinycore doesn't read (a ggml block type it can't decode, big-endian data)."""
