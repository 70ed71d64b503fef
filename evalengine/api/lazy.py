"""The names :mod:`evalengine.api` imports on first use (PEP 562): what only some commands need (proposals, SQL,
baselines, the other families' front doors), so that a command loads its own family alone (issue 17 item 4)."""

# by module
LAZY = {
    "evalengine.baselines": ("baselines",),
    "evalengine.sql": ("sql_views",),
    "evalengine.evaluation.proposals": ("ProposalEvaluation", "reference_run", "proposal_evaluation"),
    "evalengine.io.metadata": ("with_image_metadata",),
    "evalengine.geometry.homography": ("homography_table",),
    "evalengine.io.perturbations": ("read_homographies",),
    "evalengine.io.proposals": ("BOX_CONVENTIONS", "iter_proposals"),
    "evalengine.metrics.lrp": ("LRP_SEARCHES",),
    "evalengine.match.proposals": ("HOSANG_BUDGETS", "PONT_TUSET_BUDGETS", "ProposalProtocol", "PROPOSAL_IOU_TYPES"),
    "evalengine.match.repeatability": ("RepeatabilityProtocol",),
    "evalengine.match.voc": ("VocProtocol",),
    "evalengine.store.fsck": ("Finding", "fsck"),
    # the front doors of the families built on this module (they use Store and the COCO functions)
    "evalengine.api.coco": ("IN_MEMORY_DETECTIONS", "evaluate_coco", "evaluate_store", "read_gt"),
    "evalengine.api.voc": ("VOC_METRICS", "VocEvaluation", "evaluate_store_voc", "evaluate_thresholds", "evaluate_voc",
                           "ingest_voc", "lrp_protocol", "voc_output", "voc_sample"),
    "evalengine.api.diagnosis": ("TIDE_IOU_TYPES", "TIDE_MODES", "TideEvaluation", "TideProtocol", "pairs", "tide",
                                 "tide_summary"),
    "evalengine.api.confusion": ("CONFUSION_THRESHOLDS", "Confusion", "confusion", "confusion_payload"),
    "evalengine.api.upper_bound": ("UPPER_BOUND_RUN", "UPPER_BOUND_STRATEGIES", "UpperBound", "upper_bound",
                                   "upper_bound_output"),
    "evalengine.api.invariance": ("INVARIANCE_METRICS", "Invariance", "invariance", "invariance_output"),
    "evalengine.api.analyze": ("ANALYZE_CURVES", "ANALYZE_IOU_TYPES", "AnalyzeEvaluation", "AnalyzeProtocol",
                               "AnalyzeResult", "analyze", "analyze_scope", "analyze_table"),
    "evalengine.api.borji": ("BORJI_DUPLICATES", "BORJI_IOU_TYPES", "BORJI_STAGES", "BORJI_VARIANTS",
                             "BorjiEvaluation", "BorjiProtocol", "borji", "borji_summary"),
    "evalengine.api.density": ("DENSITY_KINDS", "BoxDensity", "box_density", "box_density_output"),
    "evalengine.api.streaming": ("StreamingEvaluator",),
    "evalengine.api.lvis": ("LvisEvaluation", "LvisProtocol", "evaluate_lvis", "evaluate_store_lvis", "ingest_lvis",
                            "lvis_output", "lvis_payload"),
    "evalengine.api.openimages": ("OpenImagesEvaluation", "OpenImagesProtocol", "evaluate_openimages",
                                  "evaluate_store_openimages", "ingest_openimages", "openimages_output"),
    "evalengine.api.formats": ("add_run_formats", "evaluate_formats", "export", "ingest_formats"),
}
LAZY_NAMES = {name: module for module, names in LAZY.items() for name in names}
# the names that are a module themselves, and names bound under another name
MODULE_NAMES = {"baselines", "sql_views", "proposal_evaluation"}
SOURCE_NAME = {"PROPOSAL_IOU_TYPES": "IOU_TYPES", "LRP_SEARCHES": "SEARCHES"}
