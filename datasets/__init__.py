"""The corpus recipe: training-step graph builders, profiling and the manifest."""
