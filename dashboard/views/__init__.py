"""Dashboard pages. Each view parses its parameters, calls selectors, builds figures, renders."""
