"""Rubrics: definitions (the YAML presets beside this file), validation, stored versions."""
