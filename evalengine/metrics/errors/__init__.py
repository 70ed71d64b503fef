"""Error diagnosis schemes, one small module each, as queries over the match and ``pairs`` tables: ``tide`` (Bolya et
al.); next: ``hoiem`` (COCO analyze), ``borji`` (Borji & Iranmanesh's cumulative fixes)."""
