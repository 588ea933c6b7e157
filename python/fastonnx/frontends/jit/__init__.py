"""The TorchScript front end: a TorchScript graph captured and translated into the FX form."""
