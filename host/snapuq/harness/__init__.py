"""Serial harness: protocol client, QEMU boards, host-reference checks, results and summary."""
