"""What a run leaves behind: its folder (runfolder), its ledger record (run_record), its privacy report and the
report's Markdown, and the release bundle (export) — read and written here, never computed (docs/ARCHITECTURE.md
"Run folder")."""
