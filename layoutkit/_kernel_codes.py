"""Numbers the layout kernels and their callers agree on (this module imports nothing).

:mod:`layoutkit._kernels` returns these status codes and fills buffers laid out by these
offsets; :mod:`layoutkit.layout` reads them without importing Numba.
"""

INT64_MAX = 9223372036854775807
INT64_MIN = -9223372036854775808
ITEMSIZE_LIMIT = 2**31  # itemsizes are below this (a C int, as in the reference)
EXACT_UNIQUE_LIMIT = 4096  # is_unique enumerates the offsets up to this volume
UNIQUE_SEARCH_BUDGET = 1 << 20  # nodes is_unique's exact search visits before giving up

# status codes returned by kernels (callers raise their exceptions)
OK = 0
OVERFLOW_VOLUME = 1
OVERFLOW_OFFSET = 2  # an element offset or stride does not fit in int64
OVERFLOW_BYTES = 3  # a byte stride or byte offset does not fit in int64
INCOMPATIBLE = 4
NEGATIVE_EXTENT = 5
NOT_A_MULTIPLE = 6
OUT_OF_RANGE = 7

# bits of the flags word computed by analyze()
FLAG_C = 1
FLAG_F = 2
FLAG_ANY = 4
FLAG_UNIQUE = 8  # the nesting test of is_unique_nested

# layout of the ``info`` buffer filled by analyze()
INFO_VOLUME = 0
INFO_MIN = 1
INFO_MAX = 2
INFO_FLAGS = 3
INFO_MASK = 4
INFO_ORDER = 5  # the stride order occupies info[5:5+n]

# index items of apply_index(): items[3*i:3*i+3] = (a, b, c); c != 0 is a slice
# normalised by slice.indices, c == 0 one of these kinds in b
ITEM_INDEX = 0  # the integer index a (any int64; range-checked by the kernel)
ITEM_NEWAXIS = 1  # a new axis of extent 1 (stride 0, as NumPy's)
ITEM_WHOLE = 2  # a axes kept whole ("...")
