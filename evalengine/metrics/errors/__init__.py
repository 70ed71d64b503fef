"""Error diagnosis schemes, one small module each, as queries over the match and ``pairs`` tables: ``tide`` (Bolya et
al.), ``analyze`` (COCO analyze: MATLAB ``CocoEval.analyze``, after Hoiem et al.); next: ``borji`` (Borji &
Iranmanesh's cumulative fixes)."""
