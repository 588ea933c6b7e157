"""Front ends: each turns a model into the FX program of ATen overloads the lowering takes.
``export`` traces with torch.export; ``jit`` with torch.jit (or a ScriptModule's scripted graph);
``choice`` decides which runs."""
