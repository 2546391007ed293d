"""Secret redaction: the rules as data and the linear-time redactor that applies them."""
