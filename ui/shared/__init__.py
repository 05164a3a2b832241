"""What the web UI, the API and the command line share below them: plain-text answers and paper lists,
who writes the answers, the notes an answer gets, and how a command-line entry point runs."""
