from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp import baseline_events  # noqa: F401 - registers the baselines' event families for from_dict
