"""Compiling: GPU targets, the one Triton pin, one table entry compiled for one target without a GPU,
and the content-addressed cache that makes an unchanged rebuild compile nothing."""
