"""The verdict core: findings, the rules that decide on them, and the sizing of a cause against
the loss it is asked to explain. Below ``experiments`` and ``diagnose``, which both import it;
it imports neither."""
