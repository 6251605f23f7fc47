"""fio: building job files, running them, and parsing their JSON results."""
