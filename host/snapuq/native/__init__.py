"""The C core on the host: the ctypes binding, the model blob format."""
