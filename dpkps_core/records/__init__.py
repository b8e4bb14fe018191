"""What a run leaves behind: its folder (runfolder), its ledger record (run_record), its privacy report and the
report's Markdown — read and written here, never computed (docs/ARCHITECTURE.md "Run folder"). The release bundle
built from them is ``dpkps_core.dossier.export`` (it carries the dossier, which reads these records)."""
