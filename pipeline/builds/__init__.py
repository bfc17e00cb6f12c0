"""Builds: one build directory from scripts and targets (compile, package, install), where it runs
(this Python or the platform's compile image), and the whole sequence a `build` task runs."""
