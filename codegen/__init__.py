"""The op-registry generator: registry.py parses ops.yaml, gen.py renders the generated files."""
