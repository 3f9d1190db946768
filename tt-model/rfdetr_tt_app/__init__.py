"""tt-model's entry into rfdetr-serve (kind tt-dit-server): `rfdetr_tt_app.app:app`, see app.py."""
