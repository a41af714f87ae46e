"""See DESIGN section 1."""
