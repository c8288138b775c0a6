"""Independent implementations the product is checked against (never imported by host/)."""
