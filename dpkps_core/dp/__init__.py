from dpkps_core.dp.ledger import PrivacyEvent, PrivacyLedger
