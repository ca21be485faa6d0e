// kiln CLI entry: dispatches to one subcommand per file.
int main() { return 0; }
