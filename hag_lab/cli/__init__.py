"""The lab's commands, added to `hag` by entry point (`hag demo`, `hag simulate`)."""
