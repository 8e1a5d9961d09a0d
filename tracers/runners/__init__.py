"""The sandbox's entry points (`python -m tracers.runners.functions|repos`) and the function runner's protocol."""
