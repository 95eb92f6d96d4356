"""Table formats read through Apache Arrow (``pyarrow``), imported only when a table is parsed.

``arrow_csv``  CSV through Arrow's reader, on files where it provably agrees with Python's ``csv`` module
               (else ``None``, and ``certa.engine.core.tables`` parses with the Python reader as before).
``parquet``    Parquet files: typed columns from the file's schema.
``decimal``    Text cells to float64, equal bit for bit to Python's ``float()``, vectorised.
"""
