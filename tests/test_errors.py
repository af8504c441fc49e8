"""gplace.errors: the informative line of a TensorFlow error message."""

from gplace.errors import tf_error_message


def test_a_remote_tasks_error_keeps_its_message():
    text = ("From /job:worker/replica:0/task:1:\nRecvTensor expects a different device "
            "incarnation\n\t [[{{node x}}]]")
    assert tf_error_message(text) == ("From /job:worker/replica:0/task:1: RecvTensor expects a "
                                      "different device incarnation")


def test_the_reason_not_the_header_or_the_node_line():
    assert tf_error_message("Graph execution error:\n\nDetected at node 'a'\nOOM when "
                            "allocating") == "OOM when allocating"
    assert tf_error_message("Graph execution error:\n\nDetected at node 'x' defined at:\n"
                            "  File \"<stdin>\", line 5\nNode: 'x'\nYou must feed a value for "
                            "placeholder tensor 'x'") == "You must feed a value for placeholder tensor 'x'"


def test_a_banner_line_is_not_the_reason():
    text = ("==================================================================\n"
            "You must feed a value for placeholder tensor 'r' with dtype resource\n=====")
    assert tf_error_message(text) == ("You must feed a value for placeholder tensor 'r' with "
                                      "dtype resource")
