"""Inference backends behind small interfaces (DESIGN.md section 7)."""
