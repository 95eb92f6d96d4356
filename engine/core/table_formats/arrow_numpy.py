"""numpy arrays from Arrow arrays and back through their buffers, so that reading a table never imports pandas.

pyarrow tries ``import pandas`` (when installed: about 0.4 s and 50 MB, for nothing certa uses) on the first
conversion between Arrow and Python or numpy objects: ``Array.to_numpy`` converts through Arrow's pandas
conversion layer (``ConvertArrayToPandas``, which imports pandas in C++ first), and ``pa.array(obj)``,
``pa.scalar(obj)`` and a compute function given a Python scalar (``pc.fill_null(column, 0)``) ask pyarrow's
pandas shim whether ``obj`` is a pandas object (pyarrow 26: ``pandas-shim.pxi``, ``array.pxi``).

A fixed-width Arrow array is a validity bitmap and a values buffer (Arrow columnar format, "Fixed-size primitive
layout"; a boolean array's values are a bitmap too, least significant bit first), which numpy reads directly:
``np.frombuffer`` for the values, ``np.unpackbits(bitorder="little")`` for a bitmap, each from the array's
``offset``; and back, ``pa.Array.from_buffers`` over ``pa.py_buffer`` of a contiguous numpy array. None of these
touches pandas; the values are the same bits ``to_numpy`` gives. Text goes through Python's ``str`` objects:
``to_pylist`` (as fast as ``to_numpy`` for strings) one way, UTF-8 bytes and their offsets the other.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["values_of", "nulls_of", "array_of", "text_scalar", "texts_of", "text_array"]


def _bits(buffer: pa.Buffer, offset: int, length: int) -> np.ndarray:
    """The ``length`` bits of an Arrow bitmap from bit ``offset``, as booleans."""
    first = offset // 8
    raw = np.frombuffer(buffer, dtype=np.uint8, count=(offset + length + 7) // 8 - first, offset=first)
    return np.unpackbits(raw, count=offset % 8 + length, bitorder="little")[offset % 8:].astype(bool)


_NUMPY_DTYPES = {kind: np.dtype(code) for kind, code in (
    (pa.bool_(), "?"), (pa.int8(), "i1"), (pa.int16(), "i2"), (pa.int32(), "i4"), (pa.int64(), "i8"),
    (pa.uint8(), "u1"), (pa.uint16(), "u2"), (pa.uint32(), "u4"), (pa.uint64(), "u8"), (pa.float16(), "f2"),
    (pa.float32(), "f4"), (pa.float64(), "f8"))}
"""The numpy dtype of each boolean and fixed-width numeric Arrow type (``DataType.to_pandas_dtype`` imports pandas
before pyarrow 17, and fails without it)."""


def _numpy_dtype(kind: pa.DataType) -> np.dtype:
    try:
        return _NUMPY_DTYPES[kind]
    except KeyError:
        raise TypeError(f"no numpy dtype for the Arrow type {kind} (boolean and fixed-width numbers only)") from None


def _chunk_values(chunk: pa.Array) -> np.ndarray:
    dtype = _numpy_dtype(chunk.type)
    if not len(chunk):  # its values buffer may be absent
        return np.empty(0, dtype=dtype)
    if pa.types.is_boolean(chunk.type):
        return _bits(chunk.buffers()[1], chunk.offset, len(chunk))
    return np.frombuffer(chunk.buffers()[1], dtype=dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize)


def values_of(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of a boolean or fixed-width numeric Arrow array as numpy (``array.to_numpy()``'s values: a
    read-only view of Arrow's memory for a numeric array of one chunk, else a new array). A null's slot holds
    whatever the values buffer holds there: read ``nulls_of`` with it."""
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    if len(chunks) == 1:
        return _chunk_values(chunks[0])
    if not chunks:
        return np.empty(0, dtype=_numpy_dtype(array.type))
    return np.concatenate([_chunk_values(chunk) for chunk in chunks])


def nulls_of(array: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """True where ``array`` (any type) holds a null; None when it holds none."""
    if not array.null_count:
        return None
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    return np.concatenate([~_bits(chunk.buffers()[0], chunk.offset, len(chunk)) if chunk.null_count
                           else np.zeros(len(chunk), dtype=bool) for chunk in chunks])


def array_of(values: np.ndarray) -> pa.Array:
    """A boolean or fixed-width numeric numpy array as an Arrow array of no nulls (``pa.array(values)``)."""
    values = np.ascontiguousarray(values)
    if values.dtype == np.bool_:
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(np.packbits(values, bitorder="little"))])
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def text_scalar(text: str, kind: pa.DataType) -> pa.Scalar:
    """``text`` as an Arrow scalar of the string type ``kind`` (``string`` or ``large_string``)."""
    data = text.encode("utf-8")
    offsets = np.array([0, len(data)], dtype=np.int64 if pa.types.is_large_string(kind) else np.int32)
    return pa.Array.from_buffers(kind, 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])[0]


def texts_of(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A string array's cells as an object array of Python strings (None for a null), as ``to_numpy`` gives."""
    cells = np.empty(len(array), dtype=object)
    cells[:] = array.to_pylist()
    return cells


def text_array(cells: np.ndarray) -> pa.Array:
    """An object array of Python strings as an Arrow string array of no nulls (``pa.array(cells,
    type=pa.string())``; ``large_string`` beyond 2 GiB of text). A string with a lone surrogate (not UTF-8)
    raises ``UnicodeEncodeError``, as there."""
    encoded = list(map(str.encode, cells.tolist()))
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    large = int(offsets[-1]) > np.iinfo(np.int32).max
    return pa.Array.from_buffers(pa.large_string() if large else pa.string(), len(encoded),
                                 [None, pa.py_buffer(offsets if large else offsets.astype(np.int32)),
                                  pa.py_buffer(b"".join(encoded))])
